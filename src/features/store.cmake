# The feature store proper: tiers and the lookup/push path.
set(DAIS_FEATURE_STORE_SRCS ${CMAKE_CURRENT_LIST_DIR}/online_tier.cc
                            ${CMAKE_CURRENT_LIST_DIR}/memory_tier.cc
                            ${CMAKE_CURRENT_LIST_DIR}/feature_store.cc
                            ${CMAKE_CURRENT_LIST_DIR}/feast_api.cc
                            ${CMAKE_CURRENT_LIST_DIR}/offline_import.cc)
set(DAIS_FEATURE_STORE_DEPS dais_feature_spec dais_feature_cache dais_feature_offline dais_metrics)
if(TARGET dais_redis)
  list(APPEND DAIS_FEATURE_STORE_SRCS ${CMAKE_CURRENT_LIST_DIR}/redis_tier.cc
                                      ${CMAKE_CURRENT_LIST_DIR}/invalidation.cc)
  list(APPEND DAIS_FEATURE_STORE_DEPS dais_redis)
endif()
dais_cc_library(NAME dais_features SRCS ${DAIS_FEATURE_STORE_SRCS} DEPS ${DAIS_FEATURE_STORE_DEPS})
# Feature-enriched inference: glue between the store and the runtime's RequestEnricher seam.
dais_cc_library(NAME dais_feature_enricher SRCS ${CMAKE_CURRENT_LIST_DIR}/enricher.cc
                DEPS dais_features dais_runtime)
dais_cc_test(NAME feature_store_test SRCS ${CMAKE_CURRENT_LIST_DIR}/feature_store_test.cc
             DEPS dais_features)
if(TARGET dais_redis_testing)
  dais_cc_test(NAME redis_tier_test SRCS ${CMAKE_CURRENT_LIST_DIR}/redis_tier_test.cc
               DEPS dais_features dais_redis_testing)
  dais_cc_test(NAME invalidation_test SRCS ${CMAKE_CURRENT_LIST_DIR}/invalidation_test.cc
               DEPS dais_features dais_redis_testing)
endif()
