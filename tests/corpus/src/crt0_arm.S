/* Start-up for the 32-bit Arm programs: a vector table, stacks, .bss cleared, main().
 *
 * ARMv7-A points VBAR at the table; ARMv5 has the table at address 0 (linked there). The
 * one exception a C program meets here is the SVC that asks for the tick of a software
 * "clock" before main: the handler returns a constant, to show an exception round trip. */
    .file "crt0_arm.S"
    .syntax unified
    .arm
    .section .vectors, "ax"
    .global _start
vectors:
    b _start            @ reset
    b hang              @ undefined instruction
    b svc_handler       @ supervisor call
    b hang              @ prefetch abort
    b hang              @ data abort
    b hang
    b hang              @ IRQ
    b hang              @ FIQ

    .text
_start:
#if __ARM_ARCH >= 7
    ldr r0, =vectors
    mcr p15, 0, r0, c12, c0, 0      @ VBAR
#endif
    ldr sp, =__svc_stack_top
    msr cpsr_c, #0xdf               @ System mode, interrupts masked
    ldr sp, =__stack_top
    ldr r0, =__bss_start
    ldr r1, =__bss_end
    mov r2, #0
1:  cmp r0, r1
    strlo r2, [r0], #4
    blo 1b
    mov r0, #0
    svc #0x10                       @ "read the clock": r0 = 1000 on return
    cmp r0, #1000
    bne hang
    bl main
    bl exit_with
hang:
    b hang

svc_handler:
    push {r1, lr}
    ldr r1, [lr, #-4]               @ the SVC instruction (A32 callers only)
    bic r1, r1, #0xff000000
    cmp r1, #0x10
    moveq r0, #1000
    pop {r1, lr}
    movs pc, lr
