/* How a job ends (docs/openshmem.md): `global_exit S` has PE 1 call shmem_global_exit(S) while
 * the others wait in a barrier; `status S` has PE 1 return S; `bad_put` puts to an address that
 * is not symmetric; `overflow` puts more elements than bytes can count; `before_init` calls
 * shmem_my_pe first; `mismatch` has the PEs name different roots of one broadcast. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  if (strcmp(argv[1], "before_init") == 0) return shmem_my_pe();
  shmem_init();
  const int me = shmem_my_pe();
  if (strcmp(argv[1], "global_exit") == 0) {
    if (me == 1) shmem_global_exit(atoi(argv[2]));
    shmem_barrier_all();
    return 0;
  }
  if (strcmp(argv[1], "status") == 0) {
    shmem_finalize();
    return me == 1 ? atoi(argv[2]) : 0;
  }
  if (strcmp(argv[1], "bad_put") == 0) {
    int local = 0;
    if (me == 0) shmem_putmem(&local, &local, sizeof(local), 1);
    shmem_barrier_all();
  }
  if (strcmp(argv[1], "mismatch") == 0) {
    long *block = shmem_malloc(64);
    shmem_long_broadcast(SHMEM_TEAM_WORLD, block, block, 1, me % 2);
  }
  if (strcmp(argv[1], "overflow") == 0) {
    long *block = shmem_malloc(64);
    if (me == 0) shmem_long_put(block, block, SIZE_MAX / 4, 1);
    shmem_barrier_all();
  }
  shmem_finalize();
  return 0;
}
