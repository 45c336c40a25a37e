/* Guard-paged coroutine stacks (see stack.h). */
#include "stack.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include "twinrun/err.h"

static size_t page_size(void) {
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

int twin_stack_alloc(twin_stack *s, size_t usable_bytes) {
    memset(s, 0, sizeof *s);
    const size_t page = page_size();
    const size_t usable = (usable_bytes + page - 1) / page * page;
    const size_t mapped = usable + page;
    void *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return -1;
    /* The stack grows down: the guard is the lowest page. */
    if (mprotect(p, page, PROT_NONE) != 0) {
        munmap(p, mapped);
        return -1;
    }
    s->base = p;
    s->mapped = mapped;
    s->usable = (char *)p + page;
    s->usable_size = usable;
    s->valgrind_id = VALGRIND_STACK_REGISTER(s->usable, (char *)s->usable + usable);
    return 0;
}

void twin_stack_free(twin_stack *s) {
    if (!s->base) return;
    VALGRIND_STACK_DEREGISTER(s->valgrind_id);
    TR_CHECK(munmap(s->base, s->mapped) == 0, "munmap of a coroutine stack failed");
    memset(s, 0, sizeof *s);
}
