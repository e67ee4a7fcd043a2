# cmake --install: libmlajit.so (+ soname links) and its compiler helper beside it, the public
# headers, the CLI, a CMake package (find_package(mlajit) -> mlajit::mlajit) and a pkg-config
# file (mlajit.pc).
if(SKBUILD)  # pip install .: the wheel's layout instead
  include(${CMAKE_CURRENT_LIST_DIR}/WheelInstall.cmake)
  return()
endif()

include(CMakePackageConfigHelpers)

set(MLAJIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mlajit)

install(TARGETS mlajit EXPORT mlajitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Beside the library, where it looks for its helper (src/jit/helper_locator.cpp).
install(TARGETS mlajit_compiler_helper RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mlajit
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
if(TARGET mlajit_cli)
  install(TARGETS mlajit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

install(EXPORT mlajitTargets NAMESPACE mlajit:: DESTINATION ${MLAJIT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mlajitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/mlajitConfig.cmake INSTALL_DESTINATION ${MLAJIT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mlajitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: a minor bump may break the API
install(FILES ${PROJECT_BINARY_DIR}/mlajitConfig.cmake
  ${PROJECT_BINARY_DIR}/mlajitConfigVersion.cmake DESTINATION ${MLAJIT_CMAKE_DIR})

# pkg-config: prefix relative to the .pc file's folder, so a moved install still works.
set(MLAJIT_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH MLAJIT_PC_PREFIX_FROM_PCDIR /prefix/${MLAJIT_PC_DIR} /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/mlajit.pc.in ${PROJECT_BINARY_DIR}/mlajit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mlajit.pc DESTINATION ${MLAJIT_PC_DIR})
