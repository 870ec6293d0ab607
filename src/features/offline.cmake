# Offline feature files (<root>/<group>/dt=YYYY-MM-DD/*.csv|jsonl); included from
# src/features/CMakeLists.txt. The format is documented in offline_files.h.
find_package(ZLIB REQUIRED)  # .csv.gz / .jsonl.gz partitions
dais_cc_library(NAME dais_feature_offline SRCS ${CMAKE_CURRENT_LIST_DIR}/offline_files.cc
                DEPS dais_feature_spec fmt::fmt ZLIB::ZLIB)
target_include_directories(dais_feature_offline PRIVATE ${RAPIDJSON_INCLUDE_DIR})
dais_cc_test(NAME offline_files_test SRCS ${CMAKE_CURRENT_LIST_DIR}/offline_files_test.cc
             DEPS dais_feature_offline)
