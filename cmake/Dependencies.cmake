# Third-party libraries, all from Debian 12 packages (scripts/install-deps.sh installs them).
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(SQLite3 REQUIRED)
# libpq (Debian 12: libpq-dev, PostgreSQL 15) for PostgresStore; always built.
find_package(PostgreSQL REQUIRED)
find_package(yaml-cpp REQUIRED)
if(TARGET yaml-cpp AND NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)  # yaml-cpp 0.7 exports the bare name.
endif()
find_package(nlohmann_json 3.10 REQUIRED)
find_package(spdlog REQUIRED)
find_package(cpprestsdk REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark QUIET)
