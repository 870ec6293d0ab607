# The in-process feature cache tier (L1), single-flight and heavy hitters; included from
# src/features/CMakeLists.txt. See docs/feature-cache.md.
dais_cc_library(NAME dais_feature_cache
  SRCS ${CMAKE_CURRENT_LIST_DIR}/l1_cache.cc
       ${CMAKE_CURRENT_LIST_DIR}/frequency_sketch.cc
       ${CMAKE_CURRENT_LIST_DIR}/heavy_hitters.cc
  DEPS dais_common dais_metrics Threads::Threads)
dais_cc_test(NAME l1_cache_test SRCS ${CMAKE_CURRENT_LIST_DIR}/l1_cache_test.cc
  DEPS dais_feature_cache)
dais_cc_test(NAME single_flight_test SRCS ${CMAKE_CURRENT_LIST_DIR}/single_flight_test.cc
  DEPS dais_feature_cache)
dais_cc_test(NAME heavy_hitters_test SRCS ${CMAKE_CURRENT_LIST_DIR}/heavy_hitters_test.cc
  DEPS dais_feature_cache)
dais_cc_test(NAME l1_nodes_test SRCS ${CMAKE_CURRENT_LIST_DIR}/l1_nodes_test.cc
  DEPS dais_feature_cache)
