#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0) {
    printf("usage: latch COMMAND [ARGS]\n");
    return argc < 2;
  }
  fprintf(stderr, "latch: unknown command '%s'\n", argv[1]);
  return 1;
}
