// Which template writes each kernel kind (template_kernel.h).
#include "codegen/template_kernel.h"

#include "codegen/attention_template.h"
#include "codegen/nms_template.h"
#include "codegen/recurrence_template.h"
#include "codegen/roi_align_template.h"
#include "codegen/topk_template.h"

namespace tcc {

const TemplateKernel* template_kernel(kir::Kind kind) {
  // Every kind is named, so that a new one warns here until it says whether a template writes it.
  switch (kind) {
    case kir::Kind::Attention: return &kAttentionTemplate;
    case kir::Kind::TopK: return &kTopKTemplate;
    case kir::Kind::Recurrence: return &kRecurrenceTemplate;
    case kir::Kind::Nms: return &kNmsTemplate;
    case kir::Kind::RoiAlign: return &kRoiAlignTemplate;
    case kir::Kind::Pointwise:
    case kir::Kind::Reduction:
    case kir::Kind::Gemm:
    case kir::Kind::Conv: return nullptr;
  }
  return nullptr;
}

}  // namespace tcc
