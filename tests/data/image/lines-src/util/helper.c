#include "helper.h"

int twice(int x)
{
    return x + x;
}
