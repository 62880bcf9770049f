"""The SMILES token grammar: the regex that splits a SMILES string, and the vocabulary that can spell
every bracket atom.

A SMILES string is split by the regex of Schwaller et al. (Molecular Transformer), as in DeepChem's
SmilesTokenizer, extended with dative bonds (``->``, ``<-``) and three-digit ring closures (``%(123)``).
A bracket atom that is in the vocabulary is one token (``[C@@H]``, ``[nH]``, ``[O-]``). One that is not
is spelt in pieces (WordPiece): ``[`` then ``##``-prefixed sub-tokens for the isotope digits, the element
symbol (all 118, and the aromatic ones), the chirality, the H count, the charge, the atom class and
``]``; ``[NaH]`` becomes ``[ ##Na ##H ##]``. Every printable character is also a piece, so no bracket
atom, however odd, is ever ``[UNK]``.
"""
from __future__ import annotations

import re
import string

#: One SMILES token: a single character of the organic subset, bonds, branches, stereo slashes and ring-bond
#: digits; Cl, Br; dative bonds; %nn and %(nnn) ring closures; a bracket atom. The same tokens as the Schwaller
#: regex (which lists the single characters as alternatives after the multi-character tokens): each
#: alternative here starts with characters no other one starts with, so their order does not change the
#: split, and the common single characters, tried first as one class, make both regex engines faster.
SMILES_REGEX = r"([NOSPFIbcnosp()\.=#+\\/:~@?>*$0-9]|Cl?|Br?|->?|<-|\%[0-9]{2}|\%\([0-9]+\)|\[[^\]]+])"
SMILES_PATTERN = re.compile(SMILES_REGEX)

#: Prefix of the pieces that continue a bracket atom (WordPiece's convention).
PIECE_PREFIX = "##"

ELEMENTS = (
    "H He Li Be B C N O F Ne Na Mg Al Si P S Cl Ar K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Ge As Se Br Kr Rb Sr Y Zr "
    "Nb Mo Tc Ru Rh Pd Ag Cd In Sn Sb Te I Xe Cs Ba La Ce Pr Nd Pm Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir "
    "Pt Au Hg Tl Pb Bi Po At Rn Fr Ra Ac Th Pa U Np Pu Am Cm Bk Cf Es Fm Md No Lr Rf Db Sg Bh Hs Mt Ds Rg Cn Nh Fl "
    "Mc Lv Ts Og").split()
AROMATIC = ("b", "c", "n", "o", "p", "s", "se", "te", "as", "si")
#: What follows the element inside a bracket: chirality (OpenSMILES classes), H count, charge, atom class.
BRACKET_PARTS = ("@", "@@", "@TH", "@AL", "@SP", "@TB", "@OH", "H", "+", "-", ":", "*", "]",
                 *string.digits)

#: Tokens outside brackets: the organic subset, bonds, branches, ring closures, and the opening pieces.
ORGANIC = ["C", "N", "O", "S", "P", "F", "Cl", "Br", "I", "B", "c", "n", "o", "s", "p", "b",
           "(", ")", ".", "=", "#", "-", "->", "<-", "+", "\\", "/", ":", "~", "@", "*", "$", "?", ">",
           *string.digits, *(f"%{number}" for number in range(10, 100)), "[", "%("]

#: Bracket atoms that are always single tokens: stereo centres, charges, isotopes, counter-ions and
#: metals common in drug-like sets, so that a corpus without them still yields a tokenizer that reads
#: MoleculeNet compactly. (Any other bracket atom is spelt in pieces.)
COMMON_BRACKET_ATOMS = [f"[{atom}]" for atom in (
    "C@H", "C@@H", "C@", "C@@", "S@", "S@@", "S@+", "S@@+", "P@", "P@@", "N@", "N@@", "N@+", "N@@+", "Si@",
    "nH", "nH+", "NH+", "NH2+", "NH3+", "N+", "N-", "n+", "n-", "NH-", "O-", "O+", "OH-", "S-", "S+", "s+",
    "C-", "CH-", "CH2-", "c-", "cH-", "P+", "PH", "B-", "BH-", "BH3-", "Se", "se", "Si", "Te", "As", "H", "H+",
    "2H", "3H", "11C", "13C", "14C", "13c", "15N", "18F", "123I", "125I", "131I", "18O", "35S", "32P",
    "Na", "Na+", "K", "K+", "Li", "Li+", "Mg", "Mg+2", "Ca", "Ca+2", "Zn", "Zn+2", "Fe", "Fe+2", "Fe+3",
    "Cu", "Cu+", "Cu+2", "Al", "Al+3", "Cl-", "Br-", "I-", "F-", "Pt", "Pt+2", "Au", "Ag", "Ag+", "Hg",
    "Co", "Ni", "Mn", "Cr", "Gd", "Gd+3", "Tc", "Bi", "Sb", "Ge", "Ti", "Sn", "Sr", "Sr+2", "Ba", "Ba+2",
    "Cs+", "Rb+", "Cd", "Ga", "In", "Tl", "Pb", "Zr", "Mo", "Ru", "Rh", "Pd", "La", "Y", "Xe", "CH2", "CH",
    "C", "N", "NH", "O", "OH", "S", "SH", "P", "B")]


def bracket_pieces() -> list[str]:
    """The ``##`` sub-tokens that spell any bracket atom: element symbols and bracket parts first (the
    greedy longest match picks ``##Cl`` before ``##C``), then every printable character as a fallback."""
    pieces = list(dict.fromkeys([*ELEMENTS, *AROMATIC, *BRACKET_PARTS]))  # H is an element and the H count
    fallback = [char for char in string.printable if not char.isspace() and char not in pieces]
    return [PIECE_PREFIX + piece for piece in pieces + fallback]


def base_vocabulary() -> list[str]:
    """Every token a SMILES tokenizer has whatever its corpus (special tokens excluded), in id order."""
    return [*ORGANIC, *COMMON_BRACKET_ATOMS, *bracket_pieces()]
