/* Traditional include path of shmem.h (docs/openshmem.md). */
#include "../shmem.h"
