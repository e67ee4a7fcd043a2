#pragma once
/* The version of the mlajit headers a program is compiled against. mlajit::version() (C++)
 * and mlajit_version() (C) give the version of the library loaded at run time; the two differ
 * only when a program runs against another build than it was compiled with.
 * CMake checks at configure time that these numbers equal project(mlajit VERSION ...).
 * Pure C: this header is included by mlajit.h. */
#define MLAJIT_VERSION_MAJOR 0
#define MLAJIT_VERSION_MINOR 2
#define MLAJIT_VERSION_PATCH 0
#ifndef MLAJIT_VERSION_STRING
#define MLAJIT_VERSION_STRING "0.2.0"
#endif
/* One number to compare: MLAJIT_VERSION_NUMBER >= MLAJIT_MAKE_VERSION(0, 2, 0). */
#define MLAJIT_MAKE_VERSION(major, minor, patch) ((major) * 10000 + (minor) * 100 + (patch))
#define MLAJIT_VERSION_NUMBER \
  MLAJIT_MAKE_VERSION(MLAJIT_VERSION_MAJOR, MLAJIT_VERSION_MINOR, MLAJIT_VERSION_PATCH)
