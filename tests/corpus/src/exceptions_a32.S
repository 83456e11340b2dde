/* Exceptions on AArch32: a vector table at VBAR, main code in User mode, SVCs from A32 and
 * T32 (the handler finds the immediate through SPSR.T), undefined instructions in both
 * states skipped by the Undefined handler, a BKPT taken as a prefetch abort, and returns
 * with MOVS pc, lr into either state. Semihosting from T32 uses BKPT 0xAB here.
 * Exits with the number of exceptions taken (6); prints the sum of the SVC numbers (6). */
    .file "exceptions_a32.S"
    .syntax unified
    .arm
    .section .vectors, "ax"
    .global _start
vectors:
    b _start
    b und_handler
    b svc_handler
    b pabt_handler
    b hang
    b hang
    b hang
    b hang

    .text
_start:
    ldr r0, =vectors
    mcr p15, 0, r0, c12, c0, 0      @ VBAR
    ldr sp, =__svc_stack_top
    msr cpsr_c, #0xdb               @ Undefined mode
    ldr sp, =__und_stack_top
    msr cpsr_c, #0xd7               @ Abort mode
    ldr sp, =__abt_stack_top
    msr cpsr_c, #0xd0               @ User mode: only an exception leads back
    ldr sp, =__stack_top
    svc #1
    svc #2
    .inst 0xe7f000f0                @ UDF #0 (A32)
    bkpt #1                         @ a prefetch abort (not semihosting: that is T32 BKPT 0xAB)
    ldr r0, =thumb_part + 1
    blx r0
    ldr r0, =title
    bl print
    ldr r0, =svc_sum
    ldr r0, [r0]
    add r0, r0, #'0'
    ldr r1, =digit
    strb r0, [r1]
    mov r0, r1
    bl print
    ldr r0, =taken
    ldr r0, [r0]
    bl exit
hang:
    b hang

print:                              @ SYS_WRITE0 of the string at r0
    mov r1, r0
    mov r0, #0x04
    svc #0x123456
    bx lr

exit:                               @ SYS_EXIT_EXTENDED, application exit, status r0
    ldr r1, =0x20026
    push {r0}
    push {r1}
    mov r1, sp
    mov r0, #0x20
    svc #0x123456
    b hang

svc_handler:
    push {r0-r3, lr}
    mrs r0, spsr
    tst r0, #0x20                   @ the caller's state: T32 SVC is 16 bits, imm8
    ldrhne r1, [lr, #-2]
    andne r1, r1, #0xff
    ldreq r1, [lr, #-4]
    biceq r1, r1, #0xff000000
    ldr r2, =svc_sum
    ldr r3, [r2]
    add r3, r3, r1
    str r3, [r2]
    bl count
    pop {r0-r3, lr}
    movs pc, lr                     @ back to the caller's mode and state

und_handler:                        @ lr: the instruction after the undefined one
pabt_handler:                       @ lr: the BKPT + 4, so also the next instruction
    push {r0-r3, lr}
    bl count
    pop {r0-r3, lr}
    movs pc, lr

count:
    ldr r2, =taken
    ldr r3, [r2]
    add r3, r3, #1
    str r3, [r2]
    bx lr

    .thumb
    .thumb_func
thumb_part:
    movs r0, #1
    cmp r0, #2
    ite eq                          @ the second of the pair runs, the first is skipped
    moveq r1, #1
    movne r1, #2
    svc #3
    .short 0xde01                   @ UDF #1 (T32)
    movs r0, #0x04                  @ SYS_WRITE0 through the T32 breakpoint trap
    ldr r1, =from_thumb
    bkpt #0xab
    bx lr

    .data
svc_sum: .word 0
taken: .word 0
from_thumb: .asciz "exceptions: semihosting from T32\n"
title: .asciz "exceptions: sum of SVC numbers = "
digit: .asciz "?\n"

    .bss
    .space 0x100
__und_stack_top:
    .space 0x100
__abt_stack_top:
