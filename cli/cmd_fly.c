#include "cli.h"
#include <stdio.h>
int cmd_fly(int argc, char **argv) { (void)argc; (void)argv; printf("todo\n"); return 0; }
