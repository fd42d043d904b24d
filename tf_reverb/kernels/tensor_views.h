// TensorViews: TF tensors as the core's TfReverbTensorView (server/c_api/c_api.h),
// without copying their data. DT_STRING tensors get an array of
// TfReverbString pointing into the tensors' tstrings.
//
// Contract: a value type; the viewed tensors must outlive it. Not
// synchronised.
#ifndef TF_REVERB_KERNELS_TENSOR_VIEWS_H_
#define TF_REVERB_KERNELS_TENSOR_VIEWS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "server/c_api/c_api.h"
#include "tensorflow/core/framework/tensor.h"

namespace tf_reverb {

class TensorViews {
 public:
  explicit TensorViews(const std::vector<const tensorflow::Tensor*>& tensors)
      : dims_(tensors.size()), strings_(tensors.size()), views_(tensors.size()) {
    for (size_t i = 0; i < tensors.size(); ++i) {
      const tensorflow::Tensor& tensor = *tensors[i];
      for (int d = 0; d < tensor.dims(); ++d) dims_[i].push_back(tensor.dim_size(d));
      TfReverbTensorView& view = views_[i];
      view = TfReverbTensorView{static_cast<int32_t>(tensor.dtype()), tensor.dims(),
                                dims_[i].data(), nullptr, 0};
      if (tensor.dtype() == tensorflow::DT_STRING) {
        const auto flat = tensor.flat<tensorflow::tstring>();
        for (int64_t j = 0; j < flat.size(); ++j) {
          strings_[i].push_back(TfReverbString{flat(j).data(), flat(j).size()});
        }
        view.data = strings_[i].data();
      } else {
        view.data = tensor.tensor_data().data();
        view.num_bytes = tensor.tensor_data().size();
      }
    }
  }

  const TfReverbTensorView* data() const { return views_.data(); }
  int32_t size() const { return static_cast<int32_t>(views_.size()); }

 private:
  std::vector<std::vector<int64_t>> dims_;
  std::vector<std::vector<TfReverbString>> strings_;
  std::vector<TfReverbTensorView> views_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_KERNELS_TENSOR_VIEWS_H_
