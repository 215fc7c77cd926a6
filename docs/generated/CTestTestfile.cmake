# CMake generated Testfile for 
# Source directory: /work/main/docs
# Build directory: /work/main/build/docs
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
