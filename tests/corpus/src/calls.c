/* Control flow a trace decoder must follow: recursion, loops, a switch compiled to a jump
 * table, calls through function pointers and, on 32-bit Arm, calls between A32 and T32
 * functions (OTHER_ISA marks functions built in the instruction set the file is not). */
#include "semihost.h"

#if defined(__aarch64__)
#define OTHER_ISA
#elif defined(__thumb__)
#define OTHER_ISA __attribute__((target("arm"), noinline))
#else
#define OTHER_ISA __attribute__((target("thumb"), noinline))
#endif

/* -- recursion ---------------------------------------------------------------------------- */

static int fib(int n)
{
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

static int hanoi(int disks, int from, int to, int via)
{
    if (disks == 0)
        return 0;
    return hanoi(disks - 1, from, via, to) + 1 + hanoi(disks - 1, via, to, from);
}

/* -- loops ------------------------------------------------------------------------------- */

static void bubble_sort(int *items, int count)
{
    for (int i = 0; i < count; i++)
        for (int j = count - 1; j > i; j--)
            if (items[j] < items[j - 1]) {
                int swap = items[j];
                items[j] = items[j - 1];
                items[j - 1] = swap;
            }
}

/* -- a switch on dense cases: a jump table --------------------------------------------------- */

enum { PUSH, ADD, SUB, MUL, OVER, SWAP, JNZ, DEC, HALT };

static long run_bytecode(const unsigned char *code)
{
    long stack[16];
    int sp = 0;
    for (int pc = 0;;) {
        switch (code[pc++]) {
        case PUSH: stack[sp++] = code[pc++]; break;
        case ADD: sp--; stack[sp - 1] += stack[sp]; break;
        case SUB: sp--; stack[sp - 1] -= stack[sp]; break;
        case MUL: sp--; stack[sp - 1] *= stack[sp]; break;
        case OVER: stack[sp] = stack[sp - 2]; sp++; break;
        case SWAP: { long t = stack[sp - 1]; stack[sp - 1] = stack[sp - 2]; stack[sp - 2] = t; break; }
        case JNZ: { int target = code[pc++]; if (stack[sp - 1]) pc = target; break; }
        case DEC: stack[sp - 1]--; break;
        case HALT: return stack[sp - 2];
        default: return -1;
        }
    }
}

/* -- function pointers, some of them in the other instruction set ---------------------------- */

static int add(int a, int b) { return a + b; }
static int sub(int a, int b) { return a - b; }
OTHER_ISA static int mul(int a, int b) { return a * b; }
OTHER_ISA static int max(int a, int b) { return a > b ? a : b; }

static int (*const operations[])(int, int) = {add, sub, mul, max};

static __attribute__((noinline)) int clamp(int value)
{
    return value > 99999 ? 99999 : value;
}

OTHER_ISA static int fold(int (*op)(int, int), const int *items, int count)
{
    int value = items[0];
    for (int i = 1; i < count; i++)
        value = op(value, items[i]);
    return clamp(value);  /* a direct call back into the file's instruction set */
}

int main(void)
{
    /* [result, n]: result = result OP n while --n, then the result */
    static const unsigned char factorial[] = {
        PUSH, 1, PUSH, 6, SWAP, OVER, MUL, SWAP, DEC, JNZ, 4, HALT,
    };
    static const unsigned char triangle[] = {
        PUSH, 100, PUSH, 10, SWAP, OVER, SUB, SWAP, DEC, JNZ, 4, HALT,
    };
    int items[24];
    int seed = 12345;
    for (int i = 0; i < 24; i++) {
        seed = seed * 1103515245 + 12345;
        items[i] = (seed >> 16) & 0x3ff;
    }
    bubble_sort(items, 24);
    int sorted = 1;
    for (int i = 1; i < 24; i++)
        sorted &= items[i - 1] <= items[i];

    print("calls: start\n");
    print_int("fib(15) = ", fib(15));
    print_int("hanoi(8) = ", hanoi(8, 1, 3, 2));
    print_int("sorted = ", sorted);
    print_int("smallest = ", items[0]);
    print_int("6! = ", run_bytecode(factorial));
    print_int("100-10-..-1 = ", run_bytecode(triangle));
    static const int small[] = {3, 1, 4, 1, 5, 9, 2, 6};
    long checksum = 0;
    for (unsigned i = 0; i < sizeof operations / sizeof operations[0]; i++) {
        int value = fold(operations[i], small, 8);
        print_int("fold = ", value);
        checksum = checksum * 31 + value;
    }
    print_int("checksum = ", checksum);
    return 0;
}
