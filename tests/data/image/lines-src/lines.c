#include "util/helper.h"

int counter;

static int square(int x)
{
    return x * x;
}

int accumulate(int n)
{
    int total = 0;
    for (int i = 0; i < n; i++)
        total += square(i);
    counter = twice(total);
    return total;
}

void _start(void)
{
    accumulate(10);
    for (;;)
        ;
}
