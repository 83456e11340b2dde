/* Exceptions on AArch64: a vector table at VBAR_EL1, SVCs, an undefined instruction and a
 * BRK taken to EL1, the handler decoding ESR_EL1, stepping ELR_EL1 past UDF and BRK, and
 * ERET back. Exits with the number of exceptions taken (5); prints the sum of the SVC
 * numbers (6). */
    .file "exceptions_a64.S"
    .text
    .global _start
_start:
    ldr x0, =vectors
    msr vbar_el1, x0
    isb
    ldr x0, =__stack_top
    mov sp, x0
    svc #1
    svc #2
    udf #0
    brk #5
    svc #3
    ldr x0, =title
    bl print
    ldr x1, =svc_sum
    ldr x0, [x1]
    add x0, x0, #'0'
    ldr x1, =digit
    strb w0, [x1]
    mov x0, x1
    bl print
    ldr x1, =taken
    ldr x0, [x1]
    b exit

print:                              // SYS_WRITE0 of the string at x0
    mov x1, x0
    mov x0, #0x04
    hlt #0xf000
    ret

exit:                               // SYS_EXIT, application exit, status x0
    ldr x1, =0x20026
    stp x1, x0, [sp, #-16]!
    mov x1, sp
    mov x0, #0x18
    hlt #0xf000
1:  b 1b

sync_handler:
    stp x0, x1, [sp, #-32]!
    stp x2, x3, [sp, #16]
    mrs x0, esr_el1
    lsr x1, x0, #26                 // exception class
    cmp x1, #0x15                   // SVC from AArch64
    b.ne 1f
    and x0, x0, #0xffff             // its immediate
    ldr x2, =svc_sum
    ldr x3, [x2]
    add x3, x3, x0
    str x3, [x2]
    b 2f
1:  mrs x0, elr_el1                 // undefined or breakpoint: return past it
    add x0, x0, #4
    msr elr_el1, x0
2:  ldr x2, =taken
    ldr x3, [x2]
    add x3, x3, #1
    str x3, [x2]
    ldp x2, x3, [sp, #16]
    ldp x0, x1, [sp], #32
    eret

    .balign 2048
vectors:
    .skip 0x200                     // current EL with SP_EL0
    b sync_handler                  // current EL with SP_ELx, synchronous
    .skip 0x600 - 4

    .data
svc_sum: .quad 0
taken: .quad 0
title: .asciz "exceptions: sum of SVC numbers = "
digit: .asciz "?\n"
