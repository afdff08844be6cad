#include "plugins/elf_reader.hpp"

#include <elf.h>

#include <bit>
#include <cstring>
#include <fstream>

namespace tessel {

static_assert(std::endian::native == std::endian::little, "the ELF reader reads little-endian files only");

namespace {

// No plugin comes near this; a larger file is not worth reading whole.
constexpr std::uint64_t kLargestFile = std::uint64_t{1} << 30;

// Whether [offset, offset + length) lies within `size` bytes, without overflow.
bool within(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

template <class T>
T read_at(const std::vector<std::byte>& bytes, std::uint64_t offset, const char* what) {
  if (!within(offset, sizeof(T), bytes.size())) throw ElfError(std::string(what) + " lies beyond the end of the file");
  T out;
  std::memcpy(&out, bytes.data() + offset, sizeof(T));
  return out;
}

}  // namespace

ElfFile::ElfFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  const std::streamoff end = file ? static_cast<std::streamoff>(file.tellg()) : -1;
  if (end < 0) throw ElfError("cannot read it");
  const auto size = static_cast<std::uint64_t>(end);
  if (size > kLargestFile) throw ElfError("larger than any plugin (" + std::to_string(size) + " bytes)");
  bytes_.resize(size);
  file.seekg(0);
  if (!file.read(reinterpret_cast<char*>(bytes_.data()), static_cast<std::streamsize>(size)))
    throw ElfError("cannot read it");

  if (size < SELFMAG || std::memcmp(bytes_.data(), ELFMAG, SELFMAG) != 0) throw ElfError("not an ELF file");
  const auto header = read_at<Elf64_Ehdr>(bytes_, 0, "its ELF header");
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_ident[EI_DATA] != ELFDATA2LSB)
    throw ElfError("not a 64-bit little-endian ELF file");
  if (header.e_type != ET_DYN) throw ElfError("an ELF file, but not a shared library");
  machine_ = header.e_machine;
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shnum == 0)
    throw ElfError("it has no section headers that this reader understands");
  if (!within(header.e_shoff, std::uint64_t{header.e_shnum} * sizeof(Elf64_Shdr), size))
    throw ElfError("its section headers lie beyond the end of the file");

  std::vector<Elf64_Shdr> headers;
  for (std::uint64_t i = 0; i < header.e_shnum; ++i) {
    headers.push_back(read_at<Elf64_Shdr>(bytes_, header.e_shoff + i * sizeof(Elf64_Shdr), "a section header"));
    const Elf64_Shdr& s = headers.back();
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
  const char* string_table = reinterpret_cast<const char*>(bytes_.data() + strings.sh_offset);

  for (std::uint64_t offset = 0; offset + sizeof(Elf64_Sym) <= dynsym->sh_size; offset += sizeof(Elf64_Sym)) {
    const auto symbol = read_at<Elf64_Sym>(bytes_, dynsym->sh_offset + offset, "a dynamic symbol");
    if (symbol.st_shndx == SHN_UNDEF || symbol.st_name >= strings.sh_size) continue;
    const void* end = std::memchr(string_table + symbol.st_name, '\0', strings.sh_size - symbol.st_name);
    if (end == nullptr) throw ElfError("a symbol name runs off its string table");
    names_.emplace_back(string_table + symbol.st_name, static_cast<const char*>(end));
    symbols_.push_back({symbol.st_value, symbol.st_size, symbol.st_shndx, ELF64_ST_TYPE(symbol.st_info) == STT_FUNC});
  }
}

std::optional<ElfFile::Symbol> ElfFile::exported(std::string_view name) const {
  for (std::size_t i = 0; i < symbols_.size(); ++i)
    if (names_[i] == name) return symbols_[i];
  return std::nullopt;
}

std::span<const std::byte> ElfFile::bytes_of(const Symbol& symbol) const {
  if (symbol.section >= SHN_LORESERVE || symbol.section >= sections_.size())
    throw ElfError("is not in any section of the file");
  const Section& section = sections_[symbol.section];
  if (section.type == SHT_NOBITS)
    throw ElfError("has no bytes in the file: it is initialised at run time, not at compile time");
  if (symbol.value < section.address || !within(symbol.value - section.address, symbol.size, section.size))
    throw ElfError("lies outside its section");
  return std::span(bytes_).subspan(section.offset + (symbol.value - section.address), symbol.size);
}

}  // namespace tessel
