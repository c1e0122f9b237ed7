/*
** sim_guard.c: the simulator's memory protection. A kernel on sim runs in the host process, so
** an index out of bounds would corrupt the host's heap or kill the process, where a GPU reports
** an illegal address and the program goes on. Device allocations are therefore mapped pages
** whose end abuts an inaccessible guard page (an access past a tensor's 256-byte rounding
** faults at once) and whose header lies on a read-only page below them, and a launch runs
** with faults caught: the fault becomes the launch's error.
*/
#include "internal.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    static size_t page;
    if (!page) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

static uint64_t round_to_pages(uint64_t n)
{
    uint64_t page = page_size();
    return (n + page - 1) / page * page;
}

/* An allocation's mapping: a read-only page that holds its header, its data pages, and the
** guard page. The data ends at the guard, so its start lies in the first data page, a page
** past the mapping's start: the header is found from the data's address alone, and a write
** below the data's first page faults on the header page instead of changing the header. */
typedef struct {
    uint64_t rounded; /* the data's bytes */
    uint64_t length;  /* the mapping's bytes */
} mapping_header;

static mapping_header *header_of(const void *data)
{
    uintptr_t first_data_page = (uintptr_t)data / page_size() * page_size();
    return (mapping_header *)(first_data_page - page_size());
}

void *tocha_sim_map(uint64_t rounded)
{
    uint64_t pages = round_to_pages(rounded);
    if (pages < rounded || pages > UINT64_MAX - 2 * page_size()) return NULL; /* overflow */
    uint64_t length = pages + 2 * page_size();
    char *base = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    mapping_header *h = (mapping_header *)base;
    h->rounded = rounded;
    h->length = length;
    char *guard = base + page_size() + pages;
    if (mprotect(base, page_size(), PROT_READ) != 0 || mprotect(guard, page_size(), PROT_NONE) != 0) {
        munmap(base, length);
        return NULL;
    }
    return guard - rounded;
}

uint64_t tocha_sim_mapped_bytes(const void *data) { return header_of(data)->rounded; }

void tocha_sim_unmap(void *data)
{
    mapping_header *h = header_of(data);
    munmap(h, h->length);
}

/* ---- faults inside launches ---- */

/* The catch point of the launch running on this thread, NULL outside launches. Set before the
** kernel first runs on a thread, so the handler's access to it allocates nothing. */
static _Thread_local sigjmp_buf *volatile catch_point;
static _Thread_local uintptr_t fault_address;
static struct sigaction previous_segv, previous_bus;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void on_fault(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (catch_point && info->si_code > 0) {
        fault_address = (uintptr_t)info->si_addr;
        siglongjmp(*catch_point, 1);
    }
    /* Not a launch's fault: the handling there was before, by the same fault again once this
    ** returns (a sent signal is sent again). */
    sigaction(sig, sig == SIGSEGV ? &previous_segv : &previous_bus, NULL);
    if (info->si_code <= 0) raise(sig);
}

static void install(void)
{
    struct sigaction action = {0};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv);
    sigaction(SIGBUS, &action, &previous_bus);
}

int tocha_sim_guarded(void (*run)(void *), void *arg, uintptr_t *address)
{
    pthread_once(&install_once, install);
    sigjmp_buf here;
    if (sigsetjmp(here, 1)) {
        catch_point = NULL;
        *address = fault_address;
        return 1;
    }
    catch_point = &here;
    run(arg);
    catch_point = NULL;
    return 0;
}
