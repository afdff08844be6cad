// Reading a shared library's exported data from its file, without loading it.
//
// The plugin loader checks a plugin's records before dlopen() runs any of its
// code (static constructors included); this reads them. Only what that needs:
// 64-bit little-endian ELF shared objects, their dynamic symbol table, and
// the bytes a data symbol is initialised with in the file. Only those parts
// are read (the headers, the symbol table and its names, then the records
// asked for), since a search reads every library on the search path. Every
// offset and size is checked against the file, so a truncated or hostile
// file gives an ElfError, never a read outside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

class ElfError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ElfFile {
 public:
  struct Symbol {
    std::uint64_t value = 0;  // its address in the library
    std::uint64_t size = 0;
    std::uint16_t section = 0;
    bool function = false;
  };

  // Throws ElfError, saying why, when `path` cannot be read or is not a
  // 64-bit little-endian ELF shared object with a dynamic symbol table.
  explicit ElfFile(const std::string& path);
  ~ElfFile();
  // Holds the file open; the symbol names point into its string table.
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  // The ELF machine it was built for (EM_X86_64, ...).
  std::uint16_t machine() const { return machine_; }

  // The exported symbol `name`, when the library defines it.
  std::optional<Symbol> exported(std::string_view name) const;

  // The bytes a data symbol is initialised with in the file, read from it.
  // Throws ElfError (a phrase with the symbol as subject) when they are not
  // in the file: a symbol in .bss (initialised at run time, by code) or
  // outside its section.
  std::vector<std::byte> bytes_of(const Symbol& symbol) const;

 private:
  struct Section {
    std::uint32_t type = 0;
    std::uint64_t address = 0;
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
  };

  // The headers and the dynamic symbols of a file of `size` bytes.
  void read_tables(std::uint64_t size);
  // Reads exactly `length` bytes at `offset`, already checked to lie within the file.
  void read_into(void* out, std::uint64_t offset, std::uint64_t length) const;

  int fd_ = -1;
  std::vector<char> strings_;              // the dynamic symbols' string table
  std::uint16_t machine_ = 0;
  std::vector<Section> sections_;
  std::vector<Symbol> symbols_;            // defined dynamic symbols
  std::vector<std::string_view> names_;    // theirs, pointing into strings_
};

}  // namespace tessel
