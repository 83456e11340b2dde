/* Arm semihosting for the corpus programs: print and exit, nothing else.
 *
 * The trap is SVC 0x123456 in A32, SVC 0xAB in T32 and HLT 0xF000 in A64; the operation
 * number goes in r0/w0 and its parameter (or a pointer to a parameter block) in r1/x1.
 */
#ifndef SEMIHOST_H
#define SEMIHOST_H

#define SYS_WRITE0 0x04
#define SYS_EXIT 0x18
#define SYS_EXIT_EXTENDED 0x20
#define ADP_STOPPED_APPLICATION_EXIT 0x20026

long semihost(long op, const void *param);
void print(const char *text);
void print_int(const char *label, long value);
void exit_with(long status) __attribute__((noreturn));

#endif
