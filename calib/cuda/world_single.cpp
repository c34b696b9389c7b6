// World without MPI: one process drives every GPU of the node.
#include <cstdlib>

#include "check.hpp"
#include "world.hpp"

namespace tetra::calib::gpu {

World::World() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 1) {
      fail("calibrate", "started by mpirun/srun but this tetrasim was built without MPI");
    }
  }
}
World::~World() = default;
void World::broadcast(void* /*data*/, int /*bytes*/) const {}
double World::mean(double value) const { return value; }
void World::barrier() const {}
bool World::all(bool flag) const { return flag; }
bool World::has_mpi() { return false; }

}  // namespace tetra::calib::gpu
