#ifndef APNSW_BUILD_INFO_H
#define APNSW_BUILD_INFO_H
/// The commit the programs were built from (Package.swift passes it in; "unknown" if it could not tell).
const char *apnsw_build_commit(void);
#endif
