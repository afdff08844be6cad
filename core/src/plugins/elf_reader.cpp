#include "plugins/elf_reader.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

namespace tessel {

static_assert(std::endian::native == std::endian::little, "the ELF reader reads little-endian files only");

namespace {

// No plugin comes near this; a larger file is not worth reading.
constexpr std::uint64_t kLargestFile = std::uint64_t{1} << 30;

// Whether [offset, offset + length) lies within `size` bytes, without overflow.
bool within(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace

void ElfFile::read_into(void* out, std::uint64_t offset, std::uint64_t length) const {
  auto* to = static_cast<char*>(out);
  while (length > 0) {
    const ssize_t got = ::pread(fd_, to, length, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    // Shorter than fstat said: the file shrank while being read.
    if (got <= 0) throw ElfError("cannot read it");
    to += got;
    offset += static_cast<std::uint64_t>(got);
    length -= static_cast<std::uint64_t>(got);
  }
}

ElfFile::ElfFile(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat status {};
  if (fd_ < 0 || ::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode)) {
    if (fd_ >= 0) ::close(fd_);
    throw ElfError("cannot read it");
  }
  // The descriptor is closed by the destructor, which a throwing constructor skips.
  try {
    read_tables(static_cast<std::uint64_t>(status.st_size));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

ElfFile::~ElfFile() { ::close(fd_); }

void ElfFile::read_tables(std::uint64_t size) {
  if (size > kLargestFile) throw ElfError("larger than any plugin (" + std::to_string(size) + " bytes)");

  unsigned char magic[SELFMAG];
  if (size < SELFMAG) throw ElfError("not an ELF file");
  read_into(magic, 0, SELFMAG);
  if (std::memcmp(magic, ELFMAG, SELFMAG) != 0) throw ElfError("not an ELF file");
  Elf64_Ehdr header;
  if (!within(0, sizeof header, size)) throw ElfError("its ELF header lies beyond the end of the file");
  read_into(&header, 0, sizeof header);
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB)
    throw ElfError("not a 64-bit little-endian ELF file");
  if (header.e_type != ET_DYN) throw ElfError("an ELF file, but not a shared library");
  machine_ = header.e_machine;
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0)
    throw ElfError("it has no section headers that this reader understands");
  if (!within(header.e_shoff, std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr), size))
    throw ElfError("its section headers lie beyond the end of the file");

  std::vector<Elf64_Shdr> headers(header.e_shnum);
  read_into(headers.data(), header.e_shoff, headers.size() * sizeof(Elf64_Shdr));
  for (std::size_t i = 0; i < headers.size(); ++i) {
    const Elf64_Shdr& s = headers[i];
    // A NOBITS section (.bss) takes no room in the file; bytes_of refuses it.
    if (s.sh_type != SHT_NOBITS && !within(s.sh_offset, s.sh_size, size))
      throw ElfError("its section " + std::to_string(i) + " lies beyond the end of the file");
    sections_.push_back({s.sh_type, s.sh_addr, s.sh_offset, s.sh_size});
  }

  const Elf64_Shdr* dynsym = nullptr;
  for (const Elf64_Shdr& s : headers)
    if (s.sh_type == SHT_DYNSYM) dynsym = &s;
  if (dynsym == nullptr) throw ElfError("it has no dynamic symbol table");
  if (dynsym->sh_entsize != sizeof(Elf64_Sym) || dynsym->sh_link >= headers.size() ||
      headers[dynsym->sh_link].sh_type != SHT_STRTAB)
    throw ElfError("its dynamic symbol table is malformed");
  const Elf64_Shdr& strings = headers[dynsym->sh_link];
  strings_.resize(strings.sh_size);
  read_into(strings_.data(), strings.sh_offset, strings.sh_size);
  std::vector<Elf64_Sym> symbols(dynsym->sh_size / sizeof(Elf64_Sym));
  read_into(symbols.data(), dynsym->sh_offset, symbols.size() * sizeof(Elf64_Sym));

  for (const Elf64_Sym& symbol : symbols) {
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_name >= strings.sh_size) continue;
    const char* name = strings_.data() + symbol.st_name;
    const void* end = std::memchr(name, '\0', strings.sh_size - symbol.st_name);
    if (end == nullptr) throw ElfError("a symbol name runs off its string table");
    names_.emplace_back(name, static_cast<const char*>(end));
    symbols_.push_back({symbol.st_value, symbol.st_size, symbol.st_shndx, ELF64_ST_TYPE(symbol.st_info) == STT_FUNC});
  }
}

std::optional<ElfFile::Symbol> ElfFile::exported(std::string_view name) const {
  for (std::size_t i = 0; i < symbols_.size(); ++i)
    if (names_[i] == name) return symbols_[i];
  return std::nullopt;
}

std::vector<std::byte> ElfFile::bytes_of(const Symbol& symbol) const {
  if (symbol.section >= SHN_LORESERVE || symbol.section >= sections_.size())
    throw ElfError("is not in any section of the file");
  const Section& section = sections_[symbol.section];
  if (section.type == SHT_NOBITS)
    throw ElfError("has no bytes in the file: it is initialised at run time, not at compile time");
  if (symbol.value < section.address || !within(symbol.value - section.address, symbol.size, section.size))
    throw ElfError("lies outside its section");
  std::vector<std::byte> bytes(symbol.size);
  read_into(bytes.data(), section.offset + (symbol.value - section.address), symbol.size);
  return bytes;
}

}  // namespace tessel
