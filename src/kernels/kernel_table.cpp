// atto/kernels/kernel_table.cpp: one level's table of kernels (dispatch.h), in a portable
// build's compile of the kernel files for that level; nothing in a native build.
#include "kernels/kernels.h"

#if defined(ATTO_KERNEL_VARIANT)
#define ATTO_CAT2(a, b) a##b
#define ATTO_CAT(a, b) ATTO_CAT2(a, b)
#define ATTO_TABLE_NAME ATTO_CAT(atto_kernel_table_, ATTO_KERNEL_VARIANT)

// The only global symbol of this level's kernels once they are linked into one object.
extern "C" const atto::kernels::KernelTable ATTO_TABLE_NAME;
extern "C" const atto::kernels::KernelTable ATTO_TABLE_NAME = {
#define ATTO_KERNEL_ENTRY(name) &atto::kernels::ATTO_KERNEL_VARIANT::name,
    ATTO_KERNEL_LIST(ATTO_KERNEL_ENTRY)
#undef ATTO_KERNEL_ENTRY
};
#endif
