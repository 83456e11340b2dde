/* A small freestanding program for coverage tests: sorting, a classifier with several
   conditional branches, and a function that is never called. Linux-user syscalls only. */

#define NOINLINE __attribute__((noinline))

static int data[16] = {42, -7, 0, 19, 3, -1, 88, 5, 0, 12, -30, 7, 64, 2, 9, 1};

NOINLINE static void swap(int *a, int *b)
{
    int t = *a;
    *a = *b;
    *b = t;
}

NOINLINE static int partition(int *a, int lo, int hi)
{
    int pivot = a[hi];
    int i = lo - 1;
    for (int j = lo; j < hi; j++) {
        if (a[j] <= pivot) {
            i++;
            swap(&a[i], &a[j]);
        }
    }
    swap(&a[i + 1], &a[hi]);
    return i + 1;
}

NOINLINE static void quicksort(int *a, int lo, int hi)
{
    if (lo < hi) {
        int p = partition(a, lo, hi);
        quicksort(a, lo, p - 1);
        quicksort(a, p + 1, hi);
    }
}

NOINLINE int classify(int x)
{
    if (x < 0)
        return -1;
    if (x == 0)
        return 0;
    if (x > 1000)
        return 2;
    return 1;
}

NOINLINE int never_called(int x)
{
    return x * 3 + 1;
}

NOINLINE static void leave(int status)
{
#if defined(__aarch64__)
    register long x0 __asm__("x0") = status;
    register long x8 __asm__("x8") = 93;
    __asm__ volatile("svc #0" : : "r"(x0), "r"(x8));
#else
    register long r0 __asm__("r0") = status;
    register long r7 __asm__("r7") = 1;
    __asm__ volatile("svc #0" : : "r"(r0), "r"(r7));
#endif
    for (;;) {
    }
}

void _start(void)
{
    int score = 0;
    quicksort(data, 0, 15);
    for (int i = 0; i < 16; i++)
        score += classify(data[i]);
    leave(score & 0xff);
}
