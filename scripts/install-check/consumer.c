/* consumer.c: a C program that uses an installed libtocha, built by the install check through
** pkg-config and through find_package(tocha). Fills a tensor on sim and prints the version and
** an element. */
#include <stdio.h>
#include <tocha.h>

int main(void)
{
    tocha_device *sim = NULL;
    tocha_tensor *t = NULL;
    int64_t shape[1] = {4};
    float v[4] = {0};
    if (tocha_device_get("sim", &sim) || tocha_tensor_new(sim, TOCHA_F32, 1, shape, &t) ||
        tocha_tensor_fill(t, 2.5) || tocha_tensor_read(t, 0, 4, v)) {
        fprintf(stderr, "%s\n", tocha_last_error());
        tocha_tensor_destroy(t);
        return 1;
    }
    printf("%s %g\n", tocha_version(), v[3]);
    tocha_tensor_destroy(t);
    return 0;
}
