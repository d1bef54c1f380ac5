#include "build_info.h"
#ifndef APNSW_COMMIT
#define APNSW_COMMIT "unknown"
#endif
const char *apnsw_build_commit(void) { return APNSW_COMMIT; }
