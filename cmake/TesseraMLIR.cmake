# Finds Debian's LLVM/MLIR 22 and sets up TableGen, lit and linking against libMLIR.so.
# The quirks handled here are listed in docs/design.md ("Building and testing").

if(NOT MLIR_DIR)
  set(MLIR_DIR /usr/lib/llvm-22/lib/cmake/mlir)
endif()
find_package(MLIR REQUIRED CONFIG PATHS ${MLIR_DIR} NO_DEFAULT_PATH)
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR}")
message(STATUS "Using LLVMConfig.cmake in: ${LLVM_DIR}")

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")

# Debian ships bin/lit, not bin/llvm-lit; AddLLVM reads this before it looks.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(TESSERA_LIT "${LLVM_TOOLS_BINARY_DIR}/lit")
set(LLVM_DEFAULT_EXTERNAL_LIT "${TESSERA_LIT}" CACHE FILEPATH "")
set(LLVM_EXTERNAL_LIT "${TESSERA_LIT}")
set(LLVM_LIT_ARGS "-sv" CACHE STRING "")
# The unversioned llvm-tblgen on PATH is LLVM 14.
set(LLVM_TABLEGEN_EXE "${LLVM_TOOLS_BINARY_DIR}/llvm-tblgen" CACHE FILEPATH "" FORCE)
set(MLIR_TABLEGEN_EXE "${LLVM_TOOLS_BINARY_DIR}/mlir-tblgen" CACHE FILEPATH "" FORCE)

set(MLIR_LINK_MLIR_DYLIB ON)
set(LLVM_LINK_LLVM_DYLIB ON)

include(TableGen)
include(AddLLVM)
include(AddMLIR)
include(HandleLLVMOptions)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
# Sources include "dialects/...", "tessera/..." from the tree and generated files
# from the same relative paths under the build tree.
include_directories(${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}
                    ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
link_directories(${LLVM_BUILD_LIBRARY_DIR})

# add_mlir_doc writes into ${MLIR_BINARY_DIR}/docs (target mlir-doc).
set(MLIR_BINARY_DIR ${PROJECT_BINARY_DIR}/generated)

# LLVM_DEFINITIONS is one string; passing it whole mangles the flags.
separate_arguments(TESSERA_LLVM_DEFINITIONS NATIVE_COMMAND "${LLVM_DEFINITIONS}")
add_definitions(${TESSERA_LLVM_DEFINITIONS})

# lld-22 links against libMLIR.so many times faster than bfd on two cores.
set(TESSERA_LLD_FLAGS "-fuse-ld=lld -B${LLVM_TOOLS_BINARY_DIR}")
string(APPEND CMAKE_EXE_LINKER_FLAGS " ${TESSERA_LLD_FLAGS}")
string(APPEND CMAKE_SHARED_LINKER_FLAGS " ${TESSERA_LLD_FLAGS}")
string(APPEND CMAKE_MODULE_LINKER_FLAGS " ${TESSERA_LLD_FLAGS}")

if(NOT LLVM_ENABLE_RTTI)
  string(APPEND CMAKE_CXX_FLAGS " -fno-rtti")
endif()

# Libraries of the compiler are static archives linked into the tools, which link
# the MLIR dylib; never mix MLIR archives with libMLIR.so.
set(BUILD_SHARED_LIBS OFF)

# add_tessera_library(name SRCS... [DEPENDS tgt...] [LINK tgt...])
# A compiler library that links the MLIR dylib.
function(add_tessera_library name)
  cmake_parse_arguments(ARG "" "" "DEPENDS;LINK;MLIR" ${ARGN})
  add_library(${name} STATIC ${ARG_UNPARSED_ARGUMENTS})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  target_link_libraries(${name} PUBLIC ${ARG_LINK})
  mlir_target_link_libraries(${name} PUBLIC MLIRIR MLIRSupport ${ARG_MLIR})
  target_link_libraries(${name} PUBLIC LLVM)
  # Installed (find_package(Tessera)), its headers and LLVM's, and the flags
  # LLVM's headers need: its definitions, and no RTTI where LLVM has none.
  target_include_directories(${name} INTERFACE $<INSTALL_INTERFACE:include>)
  foreach(dir ${LLVM_INCLUDE_DIRS})
    target_include_directories(${name} SYSTEM INTERFACE
      $<INSTALL_INTERFACE:${dir}>)
  endforeach()
  foreach(definition ${TESSERA_LLVM_DEFINITIONS})
    target_compile_options(${name} INTERFACE
      $<INSTALL_INTERFACE:${definition}>)
  endforeach()
  if(NOT LLVM_ENABLE_RTTI)
    target_compile_options(${name} INTERFACE $<INSTALL_INTERFACE:-fno-rtti>)
  endif()
  set_property(GLOBAL APPEND PROPERTY TESSERA_COMPILER_LIBRARIES ${name})
endfunction()
