/* Start-up for the AArch64 programs: stack, .bss cleared, main(), exit with its status. */
    .file "crt0_a64.S"
    .text
    .global _start
_start:
    ldr x0, =__stack_top
    mov sp, x0
    ldr x0, =__bss_start
    ldr x1, =__bss_end
1:  cmp x0, x1
    b.hs 2f
    str xzr, [x0], #8
    b 1b
2:  bl main
    bl exit_with
3:  b 3b
