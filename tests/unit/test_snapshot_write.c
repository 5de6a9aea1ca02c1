/* SPDX-License-Identifier: MIT */
#include "test.h"
int main(int argc, char **argv)
{
    static const struct test_case cases[] = {{"none", NULL}};
    (void)cases; (void)argc; (void)argv;
    return 77;
}
