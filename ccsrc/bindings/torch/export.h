// What the binding's shared library (hyper_parallel_shmem_binding) exports: the extension
// modules that link it (hyper_parallel_shmem_torch, and each consumer's own module under
// bindings/<consumer>/) call only what is marked HPS_BINDING_API. Everything else the library's
// own files define is hidden (the core it carries stays visible: one Runtime per process).
#pragma once

#define HPS_BINDING_API __attribute__((visibility("default")))
