/* The type-generic names of the OpenSHMEM 1.5 C API (docs/openshmem.md): C11 _Generic
 * selections in C (shmem_generic_c11.h), overloads in C++ (shmem_generic_cxx.h). A routine
 * that takes an optional context first selects its context form by its number of arguments.
 * Included by shmem.h. */
#ifndef HPS_OPENSHMEM_SHMEM_GENERIC_H
#define HPS_OPENSHMEM_SHMEM_GENERIC_H

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && (__STDC_VERSION__ >= 201112L)
#include "shmem_generic_c11.h"
#elif defined(__cplusplus)
#include "shmem_generic_cxx.h"
#endif /* C11 or C++ */

#endif /* HPS_OPENSHMEM_SHMEM_GENERIC_H */
