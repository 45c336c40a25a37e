/* Coroutine context switch (see ctx.h for why it is hand-written on x86-64). */
#include "ctx.h"

#include <stdint.h>
#include <string.h>

#include "twinrun/err.h"

#if defined(__x86_64__)

/* twin_ctx_switch(from = rdi, to = rsi): push the callee-saved registers and the FP control
 * state, store rsp in from->sp, load to->sp, pop the same layout, return into `to`. */
__asm__(".text\n"
        ".globl twin_ctx_switch\n"
        ".type twin_ctx_switch,@function\n"
        "twin_ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq (%rsi), %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size twin_ctx_switch, .-twin_ctx_switch\n"
        /* First switch-in lands here with r12 = arg, r13 = fn and rsp 16-byte aligned. */
        ".globl twin_ctx_trampoline\n"
        ".type twin_ctx_trampoline,@function\n"
        "twin_ctx_trampoline:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size twin_ctx_trampoline, .-twin_ctx_trampoline\n");

void twin_ctx_trampoline(void); /* the assembly above; declared here only to take its address */

void twin_ctx_init(twin_ctx *c, void *stack, size_t size, void (*fn)(void *), void *arg) {
    TR_CHECK(stack != NULL && size >= 4096, "coroutine stack missing or smaller than a page");
    uintptr_t top = ((uintptr_t)stack + size) & ~(uintptr_t)15;
    /* The return slot sits at top-24 (8 mod 16), so after `ret` pops it rsp = top-16 is 16-byte
     * aligned, as the ABI wants at the trampoline's call instruction. */
    uint64_t *ret_slot = (uint64_t *)(top - 24);
    uint64_t *frame = ret_slot - 7; /* csr word, r15, r14, r13, r12, rbx, rbp */
    memset(frame, 0, 8 * sizeof(uint64_t) + 16);
    uint32_t mxcsr;
    uint16_t fpucw;
    __asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
    __asm__ volatile("fnstcw %0" : "=m"(fpucw));
    memcpy((char *)frame, &mxcsr, 4);
    memcpy((char *)frame + 4, &fpucw, 2);
    frame[3] = (uint64_t)(uintptr_t)fn;  /* r13 */
    frame[4] = (uint64_t)(uintptr_t)arg; /* r12 */
    *ret_slot = (uint64_t)(uintptr_t)twin_ctx_trampoline;
    c->sp = frame;
}

#else

static void ctx_start(unsigned hi, unsigned lo) {
    twin_ctx *c = (twin_ctx *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    c->fn(c->arg);
    tr_fatal("twin coroutine entry returned; it must switch away instead");
}

void twin_ctx_init(twin_ctx *c, void *stack, size_t size, void (*fn)(void *), void *arg) {
    TR_CHECK(getcontext(&c->uc) == 0, "getcontext failed");
    c->uc.uc_stack.ss_sp = stack;
    c->uc.uc_stack.ss_size = size;
    c->uc.uc_link = NULL;
    c->fn = fn;
    c->arg = arg;
    uintptr_t p = (uintptr_t)c;
    makecontext(&c->uc, (void (*)(void))ctx_start, 2, (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
}

void twin_ctx_switch(twin_ctx *from, twin_ctx *to) {
    TR_CHECK(swapcontext(&from->uc, &to->uc) == 0, "swapcontext failed");
}

#endif
