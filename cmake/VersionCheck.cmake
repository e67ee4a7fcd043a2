# include/mlajit/version.h is written by hand (so it reads well and works without a build);
# this keeps it equal to project(mlajit VERSION ...).
file(STRINGS ${PROJECT_SOURCE_DIR}/include/mlajit/version.h MLAJIT_VERSION_LINES
  REGEX "^#define MLAJIT_VERSION_(MAJOR|MINOR|PATCH|STRING) ")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "MLAJIT_VERSION_${part} ([0-9]+)" _ "${MLAJIT_VERSION_LINES}")
  if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION_${part})
    message(FATAL_ERROR "include/mlajit/version.h has MLAJIT_VERSION_${part} '${CMAKE_MATCH_1}' "
      "but CMakeLists.txt has project(mlajit VERSION ${PROJECT_VERSION}): update the header")
  endif()
endforeach()
string(REGEX MATCH "MLAJIT_VERSION_STRING \"([^\"]*)\"" _ "${MLAJIT_VERSION_LINES}")
if(NOT CMAKE_MATCH_1 STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/mlajit/version.h has MLAJIT_VERSION_STRING \"${CMAKE_MATCH_1}\" "
    "but the project version is ${PROJECT_VERSION}: update the header")
endif()
