#include "mpi/mpi_collective.h"

#include <fmt/format.h>
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/error.h"

namespace atto::mpi {

namespace {

// Messages over INT_MAX floats would overflow MPI's int counts: the buckets are far smaller,
// but a caller's size is checked, not trusted.
int count_of(int64_t n) {
  ATTO_CHECK(n >= 0 && n <= INT_MAX, "MPI message of {} floats is beyond MPI's int count", n);
  return static_cast<int>(n);
}

class MpiRequest final : public Collective::Request {
 public:
  explicit MpiRequest(MpiCollective& c) : c_(c) {}
  ~MpiRequest() override = default;  // one still in flight is left to MPI_Abort / the process's end
  bool test() override {
    if (done_) return true;
    int flag = 0;
    const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) c_.abort(fmt::format("MPI_Test failed (MPI error {}): another rank is gone", rc));
    done_ = flag != 0;
    return done_;
  }
  MPI_Request req_ = MPI_REQUEST_NULL;

 private:
  MpiCollective& c_;
  bool done_ = false;
};

void check(MpiCollective& c, int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  c.abort(fmt::format("{} failed: {}", call, std::string(text, static_cast<size_t>(len))));
}

}  // namespace

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v) != nullptr) return true;
  return false;
}

int local_ranks() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int n = v != nullptr ? std::atoi(v) : 1;
  return n >= 1 ? n : 1;
}

std::unique_ptr<MpiCollective> MpiCollective::init() {
  int provided = 0;
  // The gradient exchange calls MPI from its own thread while the main thread waits, and the
  // main thread calls it while that thread waits: never both at once (SERIALIZED suffices).
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed: is this process started by mpirun?");
  std::unique_ptr<MpiCollective> c(new MpiCollective());
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &c->size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  MPI_Get_processor_name(name, &len);
  c->host_.assign(name, static_cast<size_t>(len));
  if (provided < MPI_THREAD_SERIALIZED)
    c->abort(fmt::format("this MPI library gives thread level {}; atto needs MPI_THREAD_SERIALIZED", provided));
  return c;
}

MpiCollective::~MpiCollective() { MPI_Finalize(); }

std::unique_ptr<Collective::Request> MpiCollective::send(const float* data, int64_t n, int to, int tag) {
  auto r = std::make_unique<MpiRequest>(*this);
  check(*this, MPI_Isend(data, count_of(n), MPI_FLOAT, to, tag, MPI_COMM_WORLD, &r->req_), "MPI_Isend");
  return r;
}

std::unique_ptr<Collective::Request> MpiCollective::recv(float* data, int64_t n, int from, int tag) {
  auto r = std::make_unique<MpiRequest>(*this);
  check(*this, MPI_Irecv(data, count_of(n), MPI_FLOAT, from, tag, MPI_COMM_WORLD, &r->req_), "MPI_Irecv");
  return r;
}

std::unique_ptr<Collective::Request> MpiCollective::broadcast(float* data, int64_t n, int root) {
  auto r = std::make_unique<MpiRequest>(*this);
  check(*this, MPI_Ibcast(data, count_of(n), MPI_FLOAT, root, MPI_COMM_WORLD, &r->req_), "MPI_Ibcast");
  return r;
}

std::vector<std::string> MpiCollective::all_gather(const std::string& mine) {
  // Lengths first, then the bytes; both as nonblocking collectives waited with the deadline.
  std::vector<int> lens(static_cast<size_t>(size_));
  int my_len = count_of(static_cast<int64_t>(mine.size()));
  MpiRequest a(*this);
  check(*this, MPI_Iallgather(&my_len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD, &a.req_), "MPI_Iallgather");
  wait(a, "agreeing with the other ranks");
  std::vector<int> offs(static_cast<size_t>(size_), 0);
  int64_t total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    offs[i] = count_of(total);
    total += lens[i];
  }
  std::string buf(static_cast<size_t>(count_of(total)), '\0');
  MpiRequest b(*this);
  check(*this,
        MPI_Iallgatherv(mine.data(), my_len, MPI_CHAR, buf.data(), lens.data(), offs.data(), MPI_CHAR, MPI_COMM_WORLD,
                        &b.req_),
        "MPI_Iallgatherv");
  wait(b, "agreeing with the other ranks");
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i)
    out.push_back(buf.substr(static_cast<size_t>(offs[i]), static_cast<size_t>(lens[i])));
  return out;
}

std::vector<std::string> MpiCollective::all_gather_same_size(const std::string& mine) {
  const int n = count_of(static_cast<int64_t>(mine.size()));
  std::string buf(mine.size() * static_cast<size_t>(size_), '\0');
  MpiRequest r(*this);
  check(*this, MPI_Iallgather(mine.data(), n, MPI_CHAR, buf.data(), n, MPI_CHAR, MPI_COMM_WORLD, &r.req_),
        "MPI_Iallgather");
  wait(r, "agreeing with the other ranks");
  std::vector<std::string> out;
  for (int i = 0; i < size_; ++i) out.push_back(buf.substr(mine.size() * static_cast<size_t>(i), mine.size()));
  return out;
}

void MpiCollective::allreduce_sum(float* data, int64_t n) {
  check(*this, MPI_Allreduce(MPI_IN_PLACE, data, count_of(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
}

void MpiCollective::barrier() { check(*this, MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void MpiCollective::abort(const std::string& why) {
  std::fprintf(stderr, "atto: error: rank %d of %d on %s: %s\n", rank_, size_, host_.c_str(), why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

}  // namespace atto::mpi
