# The model configuration (config.pbtxt): parser, validation, version policy, /config JSON.
dais_cc_library(NAME dais_model_config SRCS model_config.cc model_config_json.cc DEPS dais_common dais_proto)
target_include_directories(dais_model_config PRIVATE ${RAPIDJSON_INCLUDE_DIR})
dais_cc_test(NAME model_config_test SRCS model_config_test.cc DEPS dais_model_config)
