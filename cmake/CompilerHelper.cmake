# The compiler helper (helper/main.cpp): an executable the library starts for each compile
# process (src/jit/compiler_helper.cpp) and finds next to itself (src/jit/helper_locator.cpp).
#   build tree: build/mlajit-compiler-helper beside build/libmlajit.so (which the CLI loads),
#               plus a link in build/tests, where the tests (which link mlajit statically, so
#               "next to the code" is their own folder) look for it
#   install:    beside libmlajit.so: <libdir>/mlajit-compiler-helper (cmake/Install.cmake), or
#               mlajit/mlajit-compiler-helper in the Python wheel (cmake/WheelInstall.cmake); a
#               program linking mlajit statically from <bindir> also looks in
#               <bindir>/<relative path to libdir>
# It is built with the same flags as everything else, sanitizers included: the sanitizer
# CI stages run it instrumented (see helper/main.cpp for its sanitizer defaults).
add_executable(mlajit_compiler_helper ${PROJECT_SOURCE_DIR}/helper/main.cpp)
set_target_properties(mlajit_compiler_helper PROPERTIES
  OUTPUT_NAME mlajit-compiler-helper
  RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
target_link_libraries(mlajit_compiler_helper PRIVATE mlajit_internal)
target_compile_options(mlajit_compiler_helper PRIVATE -Wall -Wextra)
# Building the library builds its helper: a build of `mlajit` alone (the install check, a
# consumer's add_subdirectory) must not leave the library without one.
add_dependencies(mlajit mlajit_compiler_helper)

file(RELATIVE_PATH MLAJIT_HELPER_FROM_BINDIR ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
if(MLAJIT_HELPER_FROM_BINDIR STREQUAL "")
  set(MLAJIT_HELPER_FROM_BINDIR ".")
endif()
target_compile_definitions(mlajit_objects PRIVATE MLAJIT_HELPER_FROM_BINDIR="${MLAJIT_HELPER_FROM_BINDIR}")

file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
file(CREATE_LINK ../mlajit-compiler-helper ${PROJECT_BINARY_DIR}/tests/mlajit-compiler-helper
  SYMBOLIC)
if(TARGET mlajit_tests)
  add_dependencies(mlajit_tests mlajit_compiler_helper)
endif()
if(TARGET mlajit_cli)
  add_dependencies(mlajit_cli mlajit_compiler_helper)
endif()
