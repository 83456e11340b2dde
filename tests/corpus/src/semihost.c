/* Semihosting calls and the few library functions GCC may emit calls to. */
#include "semihost.h"

long semihost(long op, const void *param)
{
    register long r0 __asm__(
#ifdef __aarch64__
        "x0"
#else
        "r0"
#endif
    ) = op;
    register const void *r1 __asm__(
#ifdef __aarch64__
        "x1"
#else
        "r1"
#endif
    ) = param;
#if defined(__aarch64__)
    __asm__ volatile("hlt #0xf000" : "+r"(r0) : "r"(r1) : "memory");
#elif defined(__thumb__)
    __asm__ volatile("svc #0xab" : "+r"(r0) : "r"(r1) : "memory");
#else
    __asm__ volatile("svc #0x123456" : "+r"(r0) : "r"(r1) : "memory");
#endif
    return r0;
}

void print(const char *text)
{
    semihost(SYS_WRITE0, text);
}

void print_int(const char *label, long value)
{
    char buffer[24];
    char *p = buffer + sizeof buffer;
    unsigned long magnitude = value < 0 ? -(unsigned long)value : (unsigned long)value;
    *--p = 0;
    *--p = '\n';
    do {
        *--p = (char)('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude);
    if (value < 0)
        *--p = '-';
    print(label);
    print(p);
}

void exit_with(long status)
{
    long block[2] = {ADP_STOPPED_APPLICATION_EXIT, status};
    semihost(SYS_EXIT_EXTENDED, block);
    for (;;)
        ;
}

void *memset(void *dest, int value, unsigned long size)
{
    unsigned char *d = dest;
    while (size--)
        *d++ = (unsigned char)value;
    return dest;
}

void *memcpy(void *dest, const void *src, unsigned long size)
{
    unsigned char *d = dest;
    const unsigned char *s = src;
    while (size--)
        *d++ = *s++;
    return dest;
}
