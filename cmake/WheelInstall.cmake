# Install rules of the Python wheel (pip install .: scikit-build-core sets SKBUILD and installs
# into the wheel's staging tree). The wheel holds the library and its compiler helper inside
# the Python package, where the binding looks first, and the CLI as a script; the headers, the
# CMake package and the pkg-config file are for C and C++ consumers, who install with
# cmake --install instead.

# One plain libmlajit.so: a wheel is a zip, which holds no symlinks, so the soname links of a
# versioned library (libmlajit.so -> .so.0 -> .so.0.2.0) would each become a full copy. The
# binding opens the file by its path, so the soname is not needed to find it. (Unset, not
# set to "": CMake would still append a "." and the empty version to the file name.)
set_property(TARGET mlajit PROPERTY VERSION)
set_property(TARGET mlajit PROPERTY SOVERSION)
install(TARGETS mlajit LIBRARY DESTINATION mlajit)
# The compiler helper beside the library, where the library looks for it (dladdr of itself:
# src/jit/helper_locator.cpp), whether the binding or the CLI loaded it.
install(TARGETS mlajit_compiler_helper RUNTIME DESTINATION mlajit)

# The CLI links libmlajit.so: it goes beside it, in the package (mlajit/bin, rpath $ORIGIN/..),
# which holds for any Python version and install scheme; the `mlajit` command is a console
# script (python/mlajit_cli) that executes it.
if(TARGET mlajit_cli)
  set_target_properties(mlajit_cli PROPERTIES INSTALL_RPATH "$ORIGIN/..")
  install(TARGETS mlajit_cli RUNTIME DESTINATION mlajit/bin)
else()
  message(FATAL_ERROR "the wheel installs the mlajit CLI: configure with MLAJIT_BUILD_TOOLS=ON")
endif()
