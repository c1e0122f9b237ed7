/* file.c: what tocha's readers and writers of files (safetensors, .npy, PNG, dot) need from the
** system and Lua's io library lacks: the kind of a path (asked before opening, since opening a
** FIFO for reading blocks until a writer comes), and writes that never lose the file they
** replace: the bytes go to a temporary file beside the target, which is synced and renamed
** over it only once it is whole. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tocha_file_kind(const char *path, int *kind)
{
    if (!path || !kind) return tocha_fail(TOCHA_E_ARGUMENT, "path: expected a file name, got NULL");
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR)
            return tocha_fail(TOCHA_E_IO, "%s: %s", path, strerror(errno));
        *kind = TOCHA_FILE_MISSING;
        return TOCHA_OK;
    }
    *kind = S_ISREG(st.st_mode)                          ? TOCHA_FILE_REGULAR
            : S_ISDIR(st.st_mode)                        ? TOCHA_FILE_DIRECTORY
            : S_ISFIFO(st.st_mode)                       ? TOCHA_FILE_FIFO
            : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? TOCHA_FILE_DEVICE
            : S_ISSOCK(st.st_mode)                       ? TOCHA_FILE_SOCKET
                                                         : TOCHA_FILE_OTHER;
    return TOCHA_OK;
}

/* The permissions a new file gets from the umask (0666 less it); the umask can only be read by
** setting it, so it is set back at once. */
static mode_t default_mode(void)
{
    mode_t mask = umask(022);
    umask(mask);
    return 0666 & ~mask;
}

int tocha_file_temp(const char *target, char *name, size_t size)
{
    if (!target || !name) return tocha_fail(TOCHA_E_ARGUMENT, "path: expected a file name, got NULL");
    const char *slash = strrchr(target, '/');
    size_t dir = slash ? (size_t)(slash - target) + 1 : 0;
    const char *base = target + dir;
    if (!*base) return tocha_fail(TOCHA_E_ARGUMENT, "path: %s names a folder, not a file", target);
    int n = snprintf(name, size, "%.*s.%s.tocha-XXXXXX", (int)dir, target, base);
    if (n < 0 || (size_t)n >= size) return tocha_fail(TOCHA_E_ARGUMENT, "path: %s is too long", target);
    int fd = mkstemp(name);
    if (fd < 0)
        return tocha_fail(TOCHA_E_IO, "path: %s: cannot create a file in its folder: %s", target,
                          strerror(errno));
    /* The file a rename puts in place keeps the target's permissions, or gets a new file's. */
    struct stat st;
    mode_t mode = stat(target, &st) == 0 && S_ISREG(st.st_mode) ? st.st_mode & 07777 : default_mode();
    int failed = fchmod(fd, mode) != 0 ? errno : 0;
    close(fd);
    if (failed) {
        unlink(name);
        return tocha_fail(TOCHA_E_IO, "%s: %s", target, strerror(failed));
    }
    return TOCHA_OK;
}

/* fsync of the file or folder at path. */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags);
    if (fd < 0) return errno;
    int failed = fsync(fd) != 0 && errno != EINVAL ? errno : 0; /* EINVAL: a file system without */
    close(fd);
    return failed;
}

int tocha_file_commit(const char *temp, const char *target)
{
    if (!temp || !target) return tocha_fail(TOCHA_E_ARGUMENT, "path: expected a file name, got NULL");
    int failed = sync_path(temp, O_RDONLY);
    if (!failed && rename(temp, target) != 0) failed = errno;
    if (failed) {
        unlink(temp);
        return tocha_fail(TOCHA_E_IO, "%s: %s (the file there, if any, is unchanged)", target,
                          strerror(failed));
    }
    /* The rename itself reaches the disk with the folder. */
    const char *slash = strrchr(target, '/');
    char folder[4096];
    if (!slash)
        snprintf(folder, sizeof folder, ".");
    else
        snprintf(folder, sizeof folder, "%.*s", slash == target ? 1 : (int)(slash - target), target);
    sync_path(folder, O_RDONLY | O_DIRECTORY);
    return TOCHA_OK;
}
