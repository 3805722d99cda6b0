// How many optimizer steps the train tests compare over: the acceptance's 200, or 20 in the
// sanitizer build (unoptimized and instrumented, where 200 steps of every option took a minute;
// a memory or undefined-behaviour error shows in the first steps).
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define IPEX_TRAIN_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IPEX_TRAIN_TEST_SANITIZED 1
#endif
#endif

namespace ipex::train {
#ifdef IPEX_TRAIN_TEST_SANITIZED
constexpr int kSteps = 20;
#else
constexpr int kSteps = 200;
#endif
}  // namespace ipex::train
