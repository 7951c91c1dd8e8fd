// The MPI library's version text names the launcher that can start it.
#include <gtest/gtest.h>

#include "mpi_family.h"

namespace coil_perf {
namespace {

TEST(MpiFamily, VersionTextsOfTheLibrariesUsersHave) {
  // As MPI_Get_library_version prints them (first line).
  EXPECT_EQ(mpiFamilyOf("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: "
                        "v4.1.4, May 26, 2022"),
            MpiFamily::OpenMpi);
  EXPECT_EQ(mpiFamilyOf("MPICH Version:      4.0.2\nMPICH Release date: Thu Apr  7 12:34:45 "
                        "CDT 2022"),
            MpiFamily::Mpich);
  EXPECT_EQ(mpiFamilyOf("Intel(R) MPI Library 2021.11 for Linux* OS"), MpiFamily::Mpich);
  EXPECT_EQ(mpiFamilyOf("MVAPICH2 Version      :\t2.3.7"), MpiFamily::Mpich);
  EXPECT_EQ(mpiFamilyOf("Microsoft MPI 10.1"), MpiFamily::Other);
  EXPECT_EQ(mpiFamilyOf(""), MpiFamily::Other);
  EXPECT_EQ(mpiFamilyOf(nullptr), MpiFamily::Other);
}

}  // namespace
}  // namespace coil_perf
