/* shmem.h compiles cleanly (-Wall -Wextra -Wundef -Werror) and its generic selections pick the
 * typed routines (docs/openshmem.md); built, never run. */
#include <mpp/shmem.h>
#include <mpp/shmemx.h>
#include <shmemx.h>

long h_long;
int h_int;
double h_double;
unsigned int h_uint;

void use_every_generic(void);
void use_every_generic(void) {
  shmem_put(&h_long, &h_long, 1, 0);
  shmem_put(SHMEM_CTX_DEFAULT, &h_int, &h_int, 1, 0);
  shmem_p(&h_double, 1.0, 0);
  (void)shmem_g(&h_int, 0);
  shmem_iput(&h_long, &h_long, 1, 1, 1, 0);
  (void)shmem_atomic_fetch_add(&h_long, 1L, 0);
  shmem_atomic_inc(SHMEM_CTX_DEFAULT, &h_int, 0);
  (void)shmem_atomic_fetch_and(&h_uint, 1u, 0);
  shmem_wait_until(&h_long, SHMEM_CMP_EQ, 1L);
  (void)shmem_test(&h_int, SHMEM_CMP_NE, 0);
  (void)shmem_finc(&h_int, 0);
  (void)shmem_swap(&h_double, 2.0, 0);
  (void)shmem_sum_reduce(SHMEM_TEAM_WORLD, &h_double, &h_double, 1);
  (void)shmem_fcollect(SHMEM_TEAM_WORLD, &h_long, &h_long, 1);
}
