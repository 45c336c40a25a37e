/* Coroutine contexts: a saved stack pointer and a switch between two of them.
 *
 * On x86-64 the switch is a dozen instructions in assembly (callee-saved registers, MXCSR and the
 * x87 control word, as the SysV ABI requires preserved across calls): swapcontext would also make
 * a sigprocmask system call on every switch, which at a thousand ranks and a million switches
 * per second is most of the cost (bench_twin measures both). Other architectures use ucontext. */
#ifndef TWINRUN_SIM_SCHED_CTX_H
#define TWINRUN_SIM_SCHED_CTX_H

#include <stddef.h>

#if defined(__x86_64__)
typedef struct twin_ctx {
    void *sp;
} twin_ctx;
#else
#include <ucontext.h>
typedef struct twin_ctx {
    ucontext_t uc;
    void (*fn)(void *);
    void *arg;
} twin_ctx;
#endif

/* Prepares c to start fn(arg) on [stack, stack + size) at its first switch-in. fn must never
 * return (it switches away for the last time instead). */
void twin_ctx_init(twin_ctx *c, void *stack, size_t size, void (*fn)(void *), void *arg);

/* Saves the running context into from and resumes to. */
void twin_ctx_switch(twin_ctx *from, twin_ctx *to);

#endif
