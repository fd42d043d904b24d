// FifoSelector: always selects the oldest key still present, with probability
// 1.0 (docs/concepts/selectors.md). The contract is InsertionOrderSelector's.
#ifndef TF_REVERB_SERVER_SELECTORS_FIFO_H_
#define TF_REVERB_SERVER_SELECTORS_FIFO_H_

#include "server/selectors/insertion_order.h"

namespace tf_reverb {

class FifoSelector : public InsertionOrderSelector {
 public:
  FifoSelector() : InsertionOrderSelector(Pick::kOldest) {}
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SELECTORS_FIFO_H_
