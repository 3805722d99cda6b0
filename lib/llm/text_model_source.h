// The text model of an image-text checkpoint (Gemma3ForConditionalGeneration) under the names a
// text-only checkpoint uses: "model.X" is read from "language_model.model.X" (the layout the
// published checkpoints have) or "model.language_model.X" (newer saves), "lm_head.X" from
// "language_model.lm_head.X" or "lm_head.X". The vision tower and projector are never read.
#pragma once

#include <memory>

#include "llm/tensor_source.h"

namespace ipex::llm {

std::unique_ptr<TensorSource> text_model_source(std::unique_ptr<TensorSource> checkpoint);

}  // namespace ipex::llm
