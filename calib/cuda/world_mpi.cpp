// World over MPI (OpenMPI mpirun or Slurm srun with PMIx): one process per GPU.
#include <cstdlib>

#include <mpi.h>

#include "check.hpp"
#include "world.hpp"

namespace tetra::calib::gpu {
namespace {

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"}) {
    if (std::getenv(var) != nullptr) return true;
  }
  return false;
}

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    fail(what, msg);
  }
}

}  // namespace

World::World() {
  if (!launched_by_mpi()) return;
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited == 0) check_mpi(MPI_Init(nullptr, nullptr), "MPI_Init");
  mpi_ = true;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  check_mpi(MPI_Comm_rank(node, &local_rank_), "MPI_Comm_rank (node)");
  check_mpi(MPI_Comm_size(node, &local_size_), "MPI_Comm_size (node)");
  MPI_Comm_free(&node);
  // Node-major placement is assumed by the group layouts; check it.
  int ok = (rank_ % local_size_ == local_rank_) ? 1 : 0;
  int all = 0;
  check_mpi(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (all == 0) fail("calibrate", "ranks are not placed node-major (use --map-by ppr:N:node or srun --ntasks-per-node)");
}

World::~World() {
  if (mpi_) MPI_Finalize();
}

void World::broadcast(void* data, int bytes) const {
  if (mpi_) check_mpi(MPI_Bcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
}

double World::mean(double value) const {
  if (!mpi_) return value;
  double sum = 0;
  check_mpi(MPI_Allreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  return sum / size_;
}

void World::barrier() const {
  if (mpi_) check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

bool World::all(bool flag) const {
  if (!mpi_) return flag;
  int mine = flag ? 1 : 0;
  int every = 0;
  check_mpi(MPI_Allreduce(&mine, &every, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  return every != 0;
}

bool World::has_mpi() { return true; }

}  // namespace tetra::calib::gpu
