/* SPDX-License-Identifier: MIT */
/*
 * axctl: the command line for people and CI. Everything lives in the axcli library
 * (cli.c and friends) so the unit tests can run the same code; this file only hands
 * over the arguments and turns the result into the process exit status.
 */
#include "cli.h"

int main(int argc, char **argv) {
        return cli_main(argc, argv);
}
