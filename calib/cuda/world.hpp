#pragma once
// The calibration job's processes: one process per GPU under mpirun (OpenMPI) or srun, or a
// single process that drives every GPU of the node. Ranks are laid out node-major (rank =
// node * ranks_per_node + local rank), as mpirun --map-by ppr:8:node and srun place them.

#include <string>
#include <vector>

namespace tetra::calib::gpu {

class World {
 public:
  /// Joins the job: MPI_Init when the environment says the process was started by mpirun or
  /// srun (and this build has MPI), otherwise a world of one process.
  World();
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] int local_rank() const { return local_rank_; }
  [[nodiscard]] int local_size() const { return local_size_; }
  [[nodiscard]] int nodes() const { return local_size_ > 0 ? size_ / local_size_ : 1; }
  [[nodiscard]] bool distributed() const { return size_ > 1; }

  /// Broadcasts `bytes` bytes at `data` from rank 0 (the NCCL unique id).
  void broadcast(void* data, int bytes) const;
  /// Mean of `value` over all processes (nccl-tests averages its times the same way).
  [[nodiscard]] double mean(double value) const;
  void barrier() const;
  /// True when `flag` is true on every process (an all-reduce of the minimum), so that every
  /// process takes the same decision.
  [[nodiscard]] bool all(bool flag) const;
  /// True when this build can join multi-process jobs.
  [[nodiscard]] static bool has_mpi();

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool mpi_ = false;
};

}  // namespace tetra::calib::gpu
